import type { PDFDocument } from "pdf-lib";
import type { getDocumentProxy } from "unpdf";

// Both libraries load on the first PDF read: together some 150 modules that every Berth process (the CLI,
// each API and worker) would otherwise parse at start for a tool most turns never call.
const pdfLib = () => import("pdf-lib");
const unpdf = () => import("unpdf");

/** Reference `_read.py`: a PDF longer than this needs `pages`, and one read returns at most 20 pages. */
export const PDF_MAX_PAGES_WITHOUT_RANGE = 10;
export const PDF_MAX_PAGES_PER_READ = 20;

const ENCRYPTED = "the PDF is encrypted (password-protected) and cannot be read.";

/** A 1-based inclusive page span. */
export type PageSpan = { first: number; last: number };

/**
 * The pages one read covers, or the error text the model sees. As in the reference, surrounding blanks are
 * allowed, an end past the last page is clamped, and the 20-page cap applies after clamping.
 */
export function selectPages(pages: string | undefined, totalPages: number): PageSpan | { error: string } {
  if (pages === undefined) {
    if (totalPages > PDF_MAX_PAGES_WITHOUT_RANGE) {
      return {
        error:
          `Error: PDF has ${totalPages} pages, more than ${PDF_MAX_PAGES_WITHOUT_RANGE}. You must provide the ` +
          `pages parameter (e.g. "1-5") to read specific pages, max ${PDF_MAX_PAGES_PER_READ} pages per request.`,
      };
    }
    return { first: 1, last: totalPages };
  }
  const match = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(pages);
  if (!match) {
    return {
      error: `Error: Invalid pages ${JSON.stringify(pages)}. Expected a page number or range like "3" or "1-5".`,
    };
  }
  const first = Number(match[1]);
  const requestedLast = match[2] === undefined ? first : Number(match[2]);
  if (first < 1 || first > requestedLast || first > totalPages) {
    return { error: `Error: Invalid pages ${JSON.stringify(pages)}. PDF has ${totalPages} page(s).` };
  }
  const last = Math.min(requestedLast, totalPages);
  if (last - first + 1 > PDF_MAX_PAGES_PER_READ) {
    return {
      error:
        `Error: Requested ${last - first + 1} pages, at most ${PDF_MAX_PAGES_PER_READ} pages can be read ` +
        `per request.`,
    };
  }
  return { first, last };
}

/** An opened PDF (pdf.js, in-process: no worker thread, no network, no eval). Close it when done. */
export type OpenedPdf = {
  readonly totalPages: number;
  /** Text of the span as "--- Page i/N ---" sections separated by a blank line (reference format). */
  extractText(span: PageSpan): Promise<string>;
  close(): Promise<void>;
};

/** Thrown by openPdf and trimPdf; `message` is a sentence fit for the model. */
export class PdfReadError extends Error {
  override readonly name = "PdfReadError";
}

export async function openPdf(data: Uint8Array): Promise<OpenedPdf> {
  let proxy: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    // pdf.js may take ownership of (detach) the bytes it is given, so it gets its own copy.
    const { getDocumentProxy: open } = await unpdf();
    proxy = await open(new Uint8Array(data), {
      isEvalSupported: false,
      // Warnings about damaged files go to the console otherwise; failures still reject.
      verbosity: 0,
    });
  } catch (error) {
    throw new PdfReadError(describePdfError(error));
  }
  const document = proxy;
  if (document.numPages < 1) {
    await document.destroy();
    throw new PdfReadError("the file has no pages.");
  }
  return {
    totalPages: document.numPages,
    async extractText({ first, last }) {
      const sections: string[] = [];
      for (let pageNumber = first; pageNumber <= last; pageNumber++) {
        let text: string;
        try {
          const page = await document.getPage(pageNumber);
          const content = await page.getTextContent();
          text = content.items
            .map((item) => ("str" in item ? item.str + (item.hasEOL ? "\n" : "") : ""))
            .join("");
          page.cleanup();
        } catch (error) {
          throw new PdfReadError(`page ${pageNumber} could not be read: ${describePdfError(error)}`);
        }
        sections.push(`--- Page ${pageNumber}/${document.numPages} ---\n${text}`);
      }
      return sections.join("\n\n");
    },
    close: () => document.destroy(),
  };
}

/**
 * A new PDF holding only the span's pages (pdf-lib copies each page with the objects it references), or
 * the original bytes when the span is the whole document.
 */
export async function trimPdf(data: Uint8Array, span: PageSpan, totalPages: number): Promise<Uint8Array> {
  if (span.first === 1 && span.last === totalPages) return data;
  const failure = (reason: string) =>
    new PdfReadError(`pages ${span.first}-${span.last} could not be extracted: ${reason}`);
  const { PDFDocument: Document } = await pdfLib();
  let source: PDFDocument;
  try {
    source = await Document.load(data, { updateMetadata: false, ignoreEncryption: true });
  } catch (error) {
    throw failure(describePdfError(error));
  }
  // pdf-lib cannot decrypt; copying still-encrypted streams into a new file would yield garbage pages.
  if (source.isEncrypted) throw failure(ENCRYPTED);
  try {
    const trimmed = await Document.create({ updateMetadata: false });
    const indices = Array.from({ length: span.last - span.first + 1 }, (_, i) => span.first - 1 + i);
    for (const page of await trimmed.copyPages(source, indices)) trimmed.addPage(page);
    return await trimmed.save();
  } catch (error) {
    throw failure(describePdfError(error));
  }
}

/** pdf.js names its failures by class name; the common ones get plain words. */
function describePdfError(error: unknown): string {
  const name = error instanceof Error || isNamed(error) ? error.name : "";
  const message = error instanceof Error || isNamed(error) ? error.message : String(error);
  if (name === "PasswordException") return ENCRYPTED;
  if (name === "InvalidPDFException") return `the file is not a valid PDF (${message}).`;
  return message;
}

// pdf.js exceptions are plain objects built on a prototype chain, not always `instanceof Error` across realms.
function isNamed(value: unknown): value is { name: string; message: string } {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { name?: unknown }).name === "string" &&
    typeof (value as { message?: unknown }).message === "string"
  );
}
