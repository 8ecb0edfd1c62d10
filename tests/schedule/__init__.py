"""Schedule: the revisit policies, the change-rate estimator, budgets and the token plan."""
