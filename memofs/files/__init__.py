"""Files: the records a store holds, the store's layout, crash-safe writes, hardened JSON
reading and the secret gate. Below every stage that reads or writes ``.memofs/``."""
