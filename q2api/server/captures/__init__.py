"""Captures: a failing request written to one file a user can attach to a bug report, and read back.

redaction.py    secrets, images and documents out (size-keeping placeholders); text optionally
placeholders.py the placeholders put back as data of the same shape, for a replay
document.py     what one capture file holds, built from what a request did
recorder.py     per request: whether to capture, and writing it off the event loop
store.py        the directory: one 0600 file per capture, bounded in count and bytes
"""
