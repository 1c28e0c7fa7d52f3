"""What every room of the store shares: its errors and how values show in them,
the API's argument checks, composition from the configuration, a store's shared
context."""
