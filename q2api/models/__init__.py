"""Models, in one home: the built-in table of Claude ids → Amazon Q ids, resolution of a client's id
against an account's live catalogue, and the routing that picks the model of each request and
lists `GET /v1/models`.

The catalogue itself (what `ListAvailableModels` answers) is Amazon Q's: `q2api.amazonq.catalogue`.
"""
