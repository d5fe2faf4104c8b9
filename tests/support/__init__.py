"""Code the test tiers share (servers, fixtures, checks); not a tier itself."""
