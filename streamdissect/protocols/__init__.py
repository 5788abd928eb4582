"""The protocols streamdissect dissects, each a package behind one seam."""
