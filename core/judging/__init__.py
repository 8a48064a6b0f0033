"""Judging: how ragbridge talks to a judge model.

The `Judge`/`Embedder` protocols and their errors (`judge`), the engine every metric calls a judge
through (`engine`: in-flight cap, retries, breaker, validation, usage), the embedding engine
(`embedding`: batches of texts through the cache), the attempt policy both share (`attempts`:
timeouts, retries, backoff, how a call ends), reading a reply (`reply_parse`), the limits a run
puts on provider calls (`limits`), what a reply must look like (`reply_format`), an error as one
line (`error_text`) and a framework's own model object taken as a judge (`model_objects`).
Nothing here knows about samples being scored in batches: that is `ragbridge.core.scoring`.
"""
