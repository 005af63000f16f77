"""One package per model family: the code that trains, evaluates and compares it."""
