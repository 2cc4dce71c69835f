"""Front doors other than the native Claude one: a client protocol translated to the internal
Claude request and back from the Claude stream events. Pure — they never talk to Amazon Q;
the server runs what they produce through the one pipeline (conversion, guards, reply)."""
