"""Front: a spec file in; its plain data (located), the schema diagnostics and the typed Spec out."""
