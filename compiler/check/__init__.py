"""Check: a typed Spec in; what the passes derive (check/*.py) and the passes themselves (check/passes/) out."""
