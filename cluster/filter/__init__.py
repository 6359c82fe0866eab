"""Subscription filters shared by broker and client: tag expressions and SQL92 selectors."""
