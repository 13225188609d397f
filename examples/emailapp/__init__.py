"""A FastAPI app that sends each tenant's email on its own lane (see README.md in this folder)."""
