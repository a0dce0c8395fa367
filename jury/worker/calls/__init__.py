"""Calling models and endpoints: LiteLLM (llm_client, the one module that imports it) over
jury's own HTTP wire (openai_wire), HTTP endpoint candidates (endpoint_client), the providers'
Batch APIs (batch_client, batch_lines, provider_batches), the last wait at the send (send_wait)
and checking what a provider reports of usage and cost (usage).
"""
