"""The OpenAI Chat Completions protocol: request types, the error envelope, the reply shapes.

A protocol package like `q2api.anthropic`: it knows nothing of Anthropic, Amazon Q or the
gateway. The front door (`q2api.frontdoors`) maps it to and from the internal Claude shapes.
"""
