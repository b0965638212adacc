"""How the rules pass decides: where rules may match, and which rewrites it keeps."""
