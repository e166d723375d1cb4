"""Plain types every stage reads: the request, the plan, the catalogue rows, the target hardware, the bundle files
as read, the errors a user can see, and bounded reading of user files. Imports nothing else of trl-advisor."""
