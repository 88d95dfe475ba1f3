"""Model calls and what they cost: the budget and its meter, prices, retries, model strings
and evaluator specs.
"""
