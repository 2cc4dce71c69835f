"""The pieces of the Claude → Amazon Q request conversion.

`q2api.conversion.claude_converter.convert_claude_request` is the entry point and orchestrates these modules;
each one handles one concept (turn merging, tool results, tool specs, images, system context,
thinking, identifiers). All of them are pure: plain data in, plain data out, no I/O.
"""
