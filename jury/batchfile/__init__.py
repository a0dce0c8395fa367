"""Reading a batch file and what it names, within bounds: the file itself (loading), items in
their formats (item_readers, test_cases), bounded reads (documents), judge-config and
calibration files, submit-time overrides, a starter batch (starter), and the plan of calls,
tokens and cost (planning, generation_plan, model_catalog).
"""
