"""The fixture project's definitions folder (loaded as ``dg`` loads a project's ``defs``)."""
