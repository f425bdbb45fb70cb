/**
 * A `data` handler for a byte stream of newline-ended lines (the gateway channel, an MCP server's stdout):
 * calls `onLine` with each complete line, without its newline. Returns false once the unfinished line grows
 * beyond `maxBytes`; the caller then drops the stream.
 */
export function lineSplitter(onLine: (line: Buffer) => void, maxBytes: number): (chunk: Buffer) => boolean {
  let parts: Buffer[] = [];
  let size = 0;
  return (chunk) => {
    let start = 0;
    for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, start)) {
      const tail = chunk.subarray(start, newline);
      const line = parts.length === 0 ? tail : Buffer.concat([...parts, tail]);
      parts = [];
      size = 0;
      start = newline + 1;
      onLine(line);
    }
    if (start < chunk.length) {
      parts.push(chunk.subarray(start));
      size += chunk.length - start;
    }
    return size <= maxBytes;
  };
}
