"""The migration service (`POST /migrate/<source_tool>`, interface "Migration service").

Not built yet: it is on the roadmap after profiles and the management interface. The
package exists so that the layout names every service; it exposes nothing.
"""
