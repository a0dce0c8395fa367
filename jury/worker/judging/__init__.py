"""Judging one sample and building one verdict: the pipeline every judge task runs
(pipeline), its calls and retries (judge_calls), prompts (prompts, prompt_templates), reading
answers (parsing, answer_text, answer_forms), heuristic judges, generation by candidates, the
result cache (result_cache), the two-stage aggregation math (aggregation), a pairwise cell's
sides, winner and agreement (pairwise_verdict) and a complete cell's verdict (cell_verdict).
"""
