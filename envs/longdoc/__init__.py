"""The longdoc domain (under construction)."""
