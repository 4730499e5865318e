"""The local web app (`botec serve`)."""
