/**
 * Extensions for offloaded data blocks. The reference used Python's `mimetypes.guess_extension`, which
 * varies by Python version and OS; this is that table frozen (CPython 3.11 on Linux) for common types.
 */
const EXTENSIONS: Record<string, string> = {
  "application/json": ".json",
  "application/pdf": ".pdf",
  "application/zip": ".zip",
  "application/gzip": ".gz",
  "application/xml": ".xsl",
  "audio/mpeg": ".mp3",
  "audio/wav": ".wav",
  "audio/x-wav": ".wav",
  "audio/ogg": ".oga",
  "image/bmp": ".bmp",
  "image/gif": ".gif",
  "image/jpeg": ".jpg",
  "image/png": ".png",
  "image/svg+xml": ".svg",
  "image/tiff": ".tiff",
  "image/webp": ".webp",
  "image/x-icon": ".ico",
  "text/csv": ".csv",
  "text/html": ".html",
  "text/markdown": ".md",
  "text/plain": ".txt",
  "video/mp4": ".mp4",
  "video/webm": ".webm",
};

/** `.bin` when the media type is unknown, as in the reference. Parameters (`; charset=...`) are ignored. */
export function extensionForMediaType(mediaType: string): string {
  const bare = mediaType.split(";")[0]!.trim().toLowerCase();
  return EXTENSIONS[bare] ?? ".bin";
}
