import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { PDFDocument, StandardFonts } from "pdf-lib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createBuiltinTools, type BuiltinTool } from "@/server/workspace/tools";
import { makeTempMachine } from "./helpers";

let env: Awaited<ReturnType<typeof makeTempMachine>>;
let w: string;
beforeEach(async () => {
  env = await makeTempMachine();
  w = env.workdir;
});
afterEach(() => env.cleanup());

function readTool(acceptedMediaTypes: string[] = []): BuiltinTool {
  return createBuiltinTools(env.machine, { acceptedMediaTypes }).find((tool) => tool.name === "Read")!;
}

/** A PDF whose page k shows "Page text k" in Helvetica (a standard font, so nothing is embedded). */
async function makePdf(pageCount: number): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let k = 1; k <= pageCount; k++) {
    doc.addPage([300, 200]).drawText(`Page text ${k}`, { x: 20, y: 100, size: 12, font });
  }
  return doc.save({ useObjectStreams: false });
}

async function writePdf(name: string, pageCount: number): Promise<string> {
  await fs.writeFile(path.join(w, name), await makePdf(pageCount));
  return `${w}/${name}`;
}

/** Text drawn on the pages of a PDF, read back with pdf.js through the tool itself (text mode). */
async function pageTexts(base64: string): Promise<string> {
  await fs.writeFile(path.join(w, "back.pdf"), Buffer.from(base64, "base64"));
  return (await readTool().execute({ file_path: `${w}/back.pdf` })).content;
}

describe("Read of a PDF as text", () => {
  it("describes pages and the PDF presentation to the model", () => {
    const schema = readTool().inputSchema as { properties: { pages: { type: string; description: string } } };
    expect(schema.properties.pages).toEqual({
      type: "string",
      maxLength: 100,
      description:
        'Page range for PDF files (e.g. "1-5", "3", "10-20"), max 20 pages per request; required for PDFs ' +
        "over 10 pages. Only applies to PDF files.",
    });
    expect(readTool().description).toContain("Text is extracted per page.");
    expect(readTool(["application/pdf"]).description).toContain("presented to you as a document");
  });

  it("extracts one page or a range with --- Page i/N --- headers", async () => {
    const file = await writePdf("three.pdf", 3);
    const one = await readTool().execute({ file_path: file, pages: "2" });
    expect(one).toMatchObject({ isError: false, content: "--- Page 2/3 ---\nPage text 2" });
    expect(one.attachments).toBeUndefined();
    const range = await readTool().execute({ file_path: file, pages: "1-3" });
    expect(range.content).toBe(
      "--- Page 1/3 ---\nPage text 1\n\n--- Page 2/3 ---\nPage text 2\n\n--- Page 3/3 ---\nPage text 3",
    );
    expect(range.metadata).toMatchObject({ pages: "1-3", totalPages: 3 });
    // Up to 10 pages need no range; blanks around the numbers are tolerated, an end past N is clamped.
    expect((await readTool().execute({ file_path: file })).content).toBe(range.content);
    expect((await readTool().execute({ file_path: file, pages: " 2 - 9 " })).content).toBe(
      "--- Page 2/3 ---\nPage text 2\n\n--- Page 3/3 ---\nPage text 3",
    );
  });

  it("requires pages for a PDF over 10 pages and reads at most 20 pages", async () => {
    const twelve = await writePdf("twelve.pdf", 12);
    const whole = await readTool().execute({ file_path: twelve });
    expect(whole).toMatchObject({
      isError: true,
      content:
        'Error: PDF has 12 pages, more than 10. You must provide the pages parameter (e.g. "1-5") to read ' +
        "specific pages, max 20 pages per request.",
    });
    const tail = await readTool().execute({ file_path: twelve, pages: "11-12" });
    expect(tail.content).toBe("--- Page 11/12 ---\nPage text 11\n\n--- Page 12/12 ---\nPage text 12");

    const many = await writePdf("many.pdf", 25);
    const tooMany = await readTool().execute({ file_path: many, pages: "1-21" });
    expect(tooMany).toMatchObject({
      isError: true,
      content: "Error: Requested 21 pages, at most 20 pages can be read per request.",
    });
    const twenty = await readTool().execute({ file_path: many, pages: "3-22" });
    expect(twenty.isError).toBe(false);
    expect(twenty.content.match(/^--- Page \d+\/25 ---$/gm)).toHaveLength(20);
  });

  it.each([
    ["0", 'Error: Invalid pages "0". PDF has 3 page(s).'],
    ["5-3", 'Error: Invalid pages "5-3". PDF has 3 page(s).'],
    ["4", 'Error: Invalid pages "4". PDF has 3 page(s).'],
    ["4-6", 'Error: Invalid pages "4-6". PDF has 3 page(s).'],
    ["a", 'Error: Invalid pages "a". Expected a page number or range like "3" or "1-5".'],
    ["1,2", 'Error: Invalid pages "1,2". Expected a page number or range like "3" or "1-5".'],
    ["-2", 'Error: Invalid pages "-2". Expected a page number or range like "3" or "1-5".'],
  ])("rejects pages %j with a clear error", async (pages, message) => {
    const file = await writePdf("three.pdf", 3);
    expect(await readTool().execute({ file_path: file, pages })).toEqual({ isError: true, content: message });
    expect(await readTool(["application/pdf"]).execute({ file_path: file, pages })).toEqual({
      isError: true,
      content: message,
    });
  });
});

describe("Read of a PDF the model accepts", () => {
  it("attaches a PDF holding exactly the selected pages", async () => {
    const file = await writePdf("twelve.pdf", 12);
    const result = await readTool(["application/pdf"]).execute({ file_path: file, pages: "4-6" });
    expect(result).toMatchObject({ isError: false, metadata: { pages: "4-6", totalPages: 12 } });
    expect(result.content).toContain("page(s) 4-6 of 12");
    expect(result.attachments).toHaveLength(1);
    const block = result.attachments![0]!;
    expect(block).toMatchObject({ type: "data", mediaType: "application/pdf", name: "twelve.pdf" });
    const trimmed = await PDFDocument.load(Buffer.from(block.base64, "base64"));
    expect(trimmed.getPageCount()).toBe(3);
    expect(await pageTexts(block.base64)).toBe(
      "--- Page 1/3 ---\nPage text 4\n\n--- Page 2/3 ---\nPage text 5\n\n--- Page 3/3 ---\nPage text 6",
    );

    const single = await readTool(["application/pdf"]).execute({ file_path: file, pages: "12" });
    const one = await PDFDocument.load(Buffer.from(single.attachments![0]!.base64, "base64"));
    expect(one.getPageCount()).toBe(1);
    expect(await pageTexts(single.attachments![0]!.base64)).toBe("--- Page 1/1 ---\nPage text 12");
  });

  it("attaches a short PDF unchanged when no pages are given, and still enforces the page rules", async () => {
    const bytes = await makePdf(3);
    await fs.writeFile(path.join(w, "three.pdf"), bytes);
    const result = await readTool(["application/pdf"]).execute({ file_path: `${w}/three.pdf` });
    expect(result.attachments![0]!.base64).toBe(Buffer.from(bytes).toString("base64"));
    const twelve = await writePdf("twelve.pdf", 12);
    expect((await readTool(["application/pdf"]).execute({ file_path: twelve })).content).toContain(
      "Error: PDF has 12 pages, more than 10.",
    );
  });
});

describe("Read of a damaged or protected PDF", () => {
  it("reports a corrupt file as an error result", async () => {
    await fs.writeFile(path.join(w, "junk.pdf"), "this is not a PDF at all\n");
    for (const accepted of [[], ["application/pdf"]]) {
      const result = await readTool(accepted).execute({ file_path: `${w}/junk.pdf`, pages: "1" });
      expect(result).toEqual({
        isError: true,
        content: `Error reading PDF ${w}/junk.pdf: the file is not a valid PDF (Invalid PDF structure.).`,
      });
    }
    await fs.writeFile(path.join(w, "empty.pdf"), "");
    const empty = await readTool().execute({ file_path: `${w}/empty.pdf` });
    expect(empty.isError).toBe(true);
    expect(empty.content).toMatch(/^Error reading PDF .*empty\.pdf: /);
  });

  it("reports a PDF that needs a password", async () => {
    await fs.writeFile(path.join(w, "locked.pdf"), encrypt(await makePdf(2), { userPasswordWorks: false }));
    for (const accepted of [[], ["application/pdf"]]) {
      expect(await readTool(accepted).execute({ file_path: `${w}/locked.pdf` })).toEqual({
        isError: true,
        content: `Error reading PDF ${w}/locked.pdf: the PDF is encrypted (password-protected) and cannot be read.`,
      });
    }
  });

  it("refuses to trim an encrypted PDF that opens without a password", async () => {
    await fs.writeFile(path.join(w, "owner.pdf"), encrypt(await makePdf(2), { userPasswordWorks: true }));
    const result = await readTool(["application/pdf"]).execute({ file_path: `${w}/owner.pdf`, pages: "1" });
    expect(result).toEqual({
      isError: true,
      content:
        `Error reading PDF ${w}/owner.pdf: pages 1-1 could not be extracted: ` +
        "the PDF is encrypted (password-protected) and cannot be read.",
    });
  });
});

// --- A minimal Standard Security Handler (PDF 1.7 §7.6.3, revision 2, 40-bit RC4) for the tests above. ---

const PASSWORD_PAD = Buffer.from("28bf4e5e4e758a4164004e56fffa01082e2e00b6d0683e802f0ca9fe6453697a", "hex");

function rc4(key: Uint8Array, data: Uint8Array): Buffer {
  const s = Array.from({ length: 256 }, (_, i) => i);
  let j = 0;
  for (let i = 0; i < 256; i++) {
    j = (j + s[i]! + key[i % key.length]!) & 255;
    [s[i], s[j]] = [s[j]!, s[i]!];
  }
  const out = Buffer.alloc(data.length);
  let i = 0;
  j = 0;
  for (let k = 0; k < data.length; k++) {
    i = (i + 1) & 255;
    j = (j + s[i]!) & 255;
    [s[i], s[j]] = [s[j]!, s[i]!];
    out[k] = data[k]! ^ s[(s[i]! + s[j]!) & 255]!;
  }
  return out;
}

/**
 * Adds an /Encrypt dictionary to the trailer (after the xref table, so no offset moves). With
 * `userPasswordWorks`, U matches the empty user password (the file opens, like an owner-password-only PDF;
 * its streams are not really encrypted, which these tests never look at). Otherwise U is random, so a
 * password is required.
 */
function encrypt(pdf: Uint8Array, { userPasswordWorks }: { userPasswordWorks: boolean }): Buffer {
  const id = Buffer.from("0123456789abcdef0123456789abcdef", "hex");
  const owner = rc4(createHash("md5").update(PASSWORD_PAD).digest().subarray(0, 5), PASSWORD_PAD);
  const permissions = Buffer.alloc(4);
  permissions.writeInt32LE(-4);
  const key = createHash("md5")
    .update(Buffer.concat([PASSWORD_PAD, owner, permissions, id]))
    .digest()
    .subarray(0, 5);
  const user = userPasswordWorks ? rc4(key, PASSWORD_PAD) : Buffer.alloc(32, 7);
  const text = Buffer.from(pdf).toString("latin1");
  const trailer = text.lastIndexOf("trailer");
  const dictStart = text.indexOf("<<", trailer) + 2;
  const entries =
    `/Encrypt << /Filter /Standard /V 1 /R 2 /O <${owner.toString("hex")}> /U <${user.toString("hex")}> ` +
    `/P -4 >> /ID [<${id.toString("hex")}> <${id.toString("hex")}>] `;
  const withoutId = text.slice(dictStart).replace(/\/ID\s*\[[^\]]*\]/, "");
  return Buffer.from(text.slice(0, dictStart) + entries + withoutId, "latin1");
}
