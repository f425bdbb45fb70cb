import path from "node:path";
import { z } from "zod";
import { resolveConfined } from "@/server/workspace/paths";
import { forEachLine } from "./line-reader";
import {
  openPdf,
  PDF_MAX_PAGES_PER_READ,
  PDF_MAX_PAGES_WITHOUT_RANGE,
  PdfReadError,
  selectPages,
  trimPdf,
} from "./pdf";
import { readCapped, truncateOutput } from "./text";
import { toolPathOf } from "./tool-paths";
import { defineTool, errorResult, type BuiltinTool, type ToolContext, type ToolResult } from "./types";

const READ_DEFAULT_LIMIT = 2000;
const READ_MAX_LINE_CHARS = 2000;
/** Images and PDFs are buffered whole (attached as base64, or parsed), so they are capped. */
const READ_MAX_BINARY_BYTES = 20 * 1024 * 1024;
/** Extracted PDF text gets the same ceiling as a full text read (2000 lines of 2000 characters). */
const READ_MAX_PDF_TEXT_CHARS = READ_DEFAULT_LIMIT * READ_MAX_LINE_CHARS;

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
  file_path: z
    .string()
    .describe("The absolute path to the file to read, or a workspace:///… reference the workspace gave you"),
  offset: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe("The line number to start reading from (1-based). Only applies to plain text files"),
  limit: z
    .number()
    .int()
    .min(1)
    .max(READ_DEFAULT_LIMIT)
    .optional()
    .describe(`The number of lines to read (max ${READ_DEFAULT_LIMIT}). Only applies to plain text files`),
  // Checked by selectPages, not a regex here, so a bad range gets the reference's error text.
  pages: z
    .string()
    .max(100)
    .optional()
    .describe(
      `Page range for PDF files (e.g. "1-5", "3", "10-20"), max ${PDF_MAX_PAGES_PER_READ} pages per request; ` +
        `required for PDFs over ${PDF_MAX_PAGES_WITHOUT_RANGE} pages. Only applies to PDF files.`,
    ),
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
      "Reads a file from the workspace. file_path must be absolute (a workspace:///… reference to an offloaded " +
      "file is accepted too). Returns lines numbered like `cat -n`, " +
      `at most ${READ_DEFAULT_LIMIT} lines from \`offset\`; lines longer than ${READ_MAX_LINE_CHARS} characters are cut. ` +
      `This tool can read PDF files (.pdf). ${
        accepted.has("application/pdf")
          ? "When reading a PDF file the pages are presented to you as a document."
          : "Text is extracted per page."
      } For large PDFs (more than ${PDF_MAX_PAGES_WITHOUT_RANGE} pages), you MUST provide the pages parameter ` +
      `to read specific pages (max ${PDF_MAX_PAGES_PER_READ} pages per request).`,
    input: ZReadInput,
    async run(input) {
      const { machine } = context;
      const filePath = toolPathOf(machine, input.file_path);
      if (!path.posix.isAbsolute(filePath)) {
        return errorResult(`Error: file_path must be an absolute path, got: ${input.file_path}`);
      }
      const target = await resolveConfined(machine, filePath);
      const info = await machine.stat(target);
      if (!info) return errorResult(`Error: File does not exist: ${input.file_path}`);
      if (info.type === "directory") {
        return errorResult(
          `Error: Path is a directory, not a file: ${input.file_path}. Use Glob or Bash ls to list it.`,
        );
      }
      const extension = path.posix.extname(target).toLowerCase();
      if (extension === ".pdf") {
        context.readState?.markRead(target);
        return readPdf(context, target, input.file_path, accepted, info.size, input.pages);
      }
      const imageType = IMAGE_MEDIA_TYPES[extension];
      if (imageType !== undefined) {
        context.readState?.markRead(target);
        return readImage(context, target, input.file_path, imageType, accepted, info.size);
      }

      const offset = input.offset ?? 1;
      const limit = input.limit ?? READ_DEFAULT_LIMIT;
      const out: string[] = [];
      let totalLines = 0;
      let hasMore = false;
      await forEachLine(await machine.readFile(target), READ_MAX_LINE_CHARS, (line, index) => {
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

/** `size` is unknown when the file grew past the cap after its stat. */
function tooLarge(shownPath: string, size: number | null) {
  const actual = size === null ? `larger than ${READ_MAX_BINARY_BYTES} bytes` : `${size} bytes`;
  return errorResult(`Error: ${shownPath} is ${actual}; at most ${READ_MAX_BINARY_BYTES} bytes can be read.`);
}

async function readImage(
  context: ToolContext,
  target: string,
  shownPath: string,
  mediaType: string,
  accepted: ReadonlySet<string>,
  size: number,
) {
  if (!accepted.has(mediaType)) {
    return errorResult(
      `Error: ${shownPath} is a ${mediaType} file and the current model does not accept ${mediaType} input.`,
    );
  }
  if (size > READ_MAX_BINARY_BYTES) return tooLarge(shownPath, size);
  const { data } = await readCapped(await context.machine.readFile(target), READ_MAX_BINARY_BYTES);
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

/**
 * PDFs (reference `_read_pdf`): the selected pages go to the model as a trimmed PDF when it accepts
 * application/pdf, else as extracted text, one "--- Page i/N ---" section per page.
 */
async function readPdf(
  context: ToolContext,
  target: string,
  shownPath: string,
  accepted: ReadonlySet<string>,
  size: number,
  pages: string | undefined,
): Promise<ToolResult> {
  if (size > READ_MAX_BINARY_BYTES) return tooLarge(shownPath, size);
  // The stat above may be stale; readCapped still refuses to buffer past the cap.
  const { data, truncated } = await readCapped(await context.machine.readFile(target), READ_MAX_BINARY_BYTES);
  if (truncated) return tooLarge(shownPath, null);
  let pdf;
  try {
    pdf = await openPdf(data);
  } catch (error) {
    return pdfError(shownPath, error);
  }
  try {
    const span = selectPages(pages, pdf.totalPages);
    if ("error" in span) return errorResult(span.error);
    const metadata = {
      file_path: shownPath,
      mediaType: "application/pdf",
      pages: `${span.first}-${span.last}`,
      totalPages: pdf.totalPages,
    };
    if (!accepted.has("application/pdf")) {
      return {
        content: truncateOutput(await pdf.extractText(span), READ_MAX_PDF_TEXT_CHARS),
        isError: false,
        metadata,
      };
    }
    const bytes = Buffer.from(await trimPdf(data, span, pdf.totalPages));
    const count = span.last - span.first + 1;
    return {
      content:
        `Read PDF ${shownPath}: page(s) ${span.first}-${span.last} of ${pdf.totalPages} ` +
        `(${count} page(s), ${bytes.length} bytes), attached.`,
      isError: false,
      metadata: { ...metadata, size: bytes.length },
      attachments: [
        {
          type: "data" as const,
          mediaType: "application/pdf",
          base64: bytes.toString("base64"),
          name: path.posix.basename(target),
        },
      ],
    };
  } catch (error) {
    return pdfError(shownPath, error);
  } finally {
    await pdf.close();
  }
}

function pdfError(shownPath: string, error: unknown): ToolResult {
  if (error instanceof PdfReadError) return errorResult(`Error reading PDF ${shownPath}: ${error.message}`);
  throw error;
}
