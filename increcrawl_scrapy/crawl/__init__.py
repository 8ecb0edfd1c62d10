"""What any crawl with the add-on runs, whichever spider it is: the crawl's state
and run row, delivery that loses nothing, a response's items as one page, the
run summary, progress lines and the token budget.
"""
