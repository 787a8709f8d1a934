"""User and group profiles: the update objects, their application, the state store and group key ids."""
