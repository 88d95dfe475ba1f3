"""Model calls and what they cost: the budget's meter, prices, retries, model strings, specs."""
