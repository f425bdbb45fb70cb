import path from "node:path";
import { z } from "zod";
import { resolveConfined } from "@/server/workspace/paths";
import { forEachLine } from "./line-reader";
import { readCapped } from "./text";
import { defineTool, errorResult, type BuiltinTool, type ToolContext } from "./types";

export const READ_DEFAULT_LIMIT = 2000;
export const READ_MAX_LINE_CHARS = 2000;
/** Images and PDFs are returned whole as base64, so they are capped. */
export const READ_MAX_BINARY_BYTES = 20 * 1024 * 1024;

const IMAGE_MEDIA_TYPES: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".bmp": "image/bmp",
  ".tiff": "image/tiff",
  ".tif": "image/tiff",
  ".ico": "image/x-icon",
};

const ZReadInput = z.object({
  file_path: z.string().describe("The absolute path to the file to read"),
  offset: z.number().int().min(1).optional().describe("The line number to start reading from (1-based)"),
  limit: z
    .number()
    .int()
    .min(1)
    .max(READ_DEFAULT_LIMIT)
    .optional()
    .describe(`The number of lines to read (max ${READ_DEFAULT_LIMIT})`),
  pages: z
    .string()
    .regex(/^\d+(-\d+)?$/)
    .optional()
    .describe('Page range for PDF files, e.g. "3" or "1-5"'),
});

export type ReadToolOptions = {
  /** Media types the model accepts as input (e.g. "image/png", "application/pdf"). Default: none. */
  acceptedMediaTypes?: readonly string[];
};

/** Read (reference `_read.py`): numbered lines `{n:6d}\t{line}`, offset/limit, long lines cut. */
export function createReadTool(context: ToolContext, options: ReadToolOptions = {}): BuiltinTool {
  const accepted = new Set(options.acceptedMediaTypes ?? []);
  return defineTool({
    name: "Read",
    description:
      "Reads a file from the workspace. file_path must be absolute. Returns lines numbered like `cat -n`, " +
      `at most ${READ_DEFAULT_LIMIT} lines from \`offset\`; lines longer than ${READ_MAX_LINE_CHARS} characters are cut.`,
    input: ZReadInput,
    async run(input) {
      const { backend } = context;
      if (!path.posix.isAbsolute(input.file_path)) {
        return errorResult(`Error: file_path must be an absolute path, got: ${input.file_path}`);
      }
      const target = await resolveConfined(backend, input.file_path);
      const info = await backend.stat(target);
      if (!info) return errorResult(`Error: File does not exist: ${input.file_path}`);
      if (info.type === "directory") {
        return errorResult(
          `Error: Path is a directory, not a file: ${input.file_path}. Use Glob or Bash ls to list it.`,
        );
      }
      const extension = path.posix.extname(target).toLowerCase();
      const imageType = IMAGE_MEDIA_TYPES[extension];
      if (imageType !== undefined || extension === ".pdf") {
        context.readState?.markRead(target);
        return readBinary(
          context,
          target,
          input.file_path,
          imageType ?? "application/pdf",
          accepted,
          info.size,
          input.pages,
        );
      }

      const offset = input.offset ?? 1;
      const limit = input.limit ?? READ_DEFAULT_LIMIT;
      const out: string[] = [];
      let totalLines = 0;
      let hasMore = false;
      await forEachLine(await backend.readFile(target), READ_MAX_LINE_CHARS, (line, index) => {
        totalLines = index + 1;
        const lineNumber = index + 1;
        if (lineNumber < offset) return true;
        if (out.length >= limit) {
          hasMore = true;
          return false;
        }
        out.push(`${String(lineNumber).padStart(6)}\t${line.text}${line.cut ? "... [truncated]" : ""}`);
        return true;
      });
      context.readState?.markRead(target);
      const metadata = { file_path: input.file_path, offset, linesReturned: out.length, hasMore };
      if (totalLines === 0) {
        return {
          content: "<system-reminder>Warning: the file exists but its contents are empty.</system-reminder>",
          isError: false,
          metadata,
        };
      }
      if (out.length === 0) {
        return {
          content:
            `<system-reminder>Warning: the file exists but is shorter than the provided offset (${offset}). ` +
            `The file has ${totalLines} lines.</system-reminder>`,
          isError: false,
          metadata,
        };
      }
      return { content: out.join("\n"), isError: false, metadata };
    },
  });
}

async function readBinary(
  context: ToolContext,
  target: string,
  shownPath: string,
  mediaType: string,
  accepted: ReadonlySet<string>,
  size: number,
  pages: string | undefined,
) {
  if (mediaType === "application/pdf" && pages !== undefined) {
    // Page selection needs a PDF parser; Berth ships none yet, so say so instead of guessing.
    return errorResult(
      `Error: reading selected PDF pages is not supported; read the whole PDF without 'pages'.`,
    );
  }
  if (!accepted.has(mediaType)) {
    return errorResult(
      `Error: ${shownPath} is a ${mediaType} file and the current model does not accept ${mediaType} input.`,
    );
  }
  if (size > READ_MAX_BINARY_BYTES) {
    return errorResult(
      `Error: ${shownPath} is ${size} bytes; at most ${READ_MAX_BINARY_BYTES} bytes can be attached.`,
    );
  }
  const { data } = await readCapped(await context.backend.readFile(target), READ_MAX_BINARY_BYTES);
  return {
    content: `Read ${mediaType} file ${shownPath} (${data.length} bytes), attached.`,
    isError: false,
    metadata: { file_path: shownPath, mediaType, size: data.length },
    attachments: [
      {
        type: "data" as const,
        mediaType,
        base64: data.toString("base64"),
        name: path.posix.basename(target),
      },
    ],
  };
}
