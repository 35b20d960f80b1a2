"""Multi-head attention workbench: the attention engine, the API and the learner data around it.

Importing this package does no work and pulls in no Flask: `service.compute` runs on numpy alone.
"""
