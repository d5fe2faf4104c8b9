"""How rows get into a declared table: its asset, fanned-out writes, the landing and changes
sensors, the changes consumer, resumed writes and the data check of each written partition."""
