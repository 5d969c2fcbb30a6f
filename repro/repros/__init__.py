"""The built-in catalog: one module per repro, each registering itself with ``@register``."""
