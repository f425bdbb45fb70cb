import { Readable, Transform } from "node:stream";
import { assertNoUnsafeStrings } from "@/server/shared/unsafe-strings";
import type { ReadableStream as NodeWebReadableStream } from "node:stream/web";
import busboy from "busboy";
import { pack as createTarPack } from "tar-stream";
import { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";
import type { ArchiveFormat } from "@/server/workspace/archive/archive-entries";
import { MAX_SKILL_ROOT_DEPTH } from "@/server/workspace/skills/skill-names";

/** The reference's upload limits (agentscope-spec.md §3.8). */
export const SKILL_UPLOAD_LIMITS = {
  maxFileBytes: 50 * 1024 * 1024,
  maxTotalBytes: 500 * 1024 * 1024,
  maxFileCount: 100,
  maxConcurrentInstalls: 5,
} as const;

const ZManifest = z.object({
  entries: z.array(z.object({ path: z.string().min(1).max(1024), size: z.number().int().min(0) })).min(1),
});
export type SkillManifest = z.infer<typeof ZManifest>;

const invalid = (message: string) => new AppError("UNPROCESSABLE", message, { userMessage: message });

/**
 * `validate_manifest`: entry count, sizes, path shape (≥ 2 segments, no ""/"."/"..", not absolute), one
 * root, and a SKILL.md in the root or in a folder at most MAX_SKILL_ROOT_DEPTH - 1 below it (the engine
 * then installs the first folder holding one, see findSkillRoot: `outer/inner/SKILL.md` installs `inner`).
 */
function validateManifest(raw: unknown, limits = SKILL_UPLOAD_LIMITS): SkillManifest {
  // A NUL or unpaired surrogate in a path is refused as bad input (400), like every other boundary.
  assertNoUnsafeStrings(raw, "manifest");
  const parsed = ZManifest.safeParse(raw);
  if (!parsed.success)
    throw invalid("The manifest must be {entries: [{path, size}]} with at least one entry.");
  const entries = parsed.data.entries.map((entry) => ({ ...entry, path: entry.path.replaceAll("\\", "/") }));
  if (entries.length > limits.maxFileCount) throw invalid(`At most ${limits.maxFileCount} files per skill.`);
  let total = 0;
  const roots = new Set<string>();
  for (const entry of entries) {
    if (entry.size > limits.maxFileBytes)
      throw invalid(`${entry.path} is larger than ${limits.maxFileBytes} bytes.`);
    total += entry.size;
    const segments = entry.path.split("/");
    if (segments.some((segment) => Buffer.byteLength(segment) > 255))
      throw invalid(`A name in ${entry.path.slice(0, 100)}… is longer than 255 bytes.`);
    if (
      entry.path.startsWith("/") ||
      segments.length < 2 ||
      segments.some((s) => s === "" || s === "." || s === "..")
    ) {
      throw invalid(`Invalid path in the manifest: ${entry.path}`);
    }
    roots.add(segments[0]!);
  }
  if (total > limits.maxTotalBytes)
    throw invalid(`The skill is larger than ${limits.maxTotalBytes} bytes in total.`);
  if (roots.size !== 1) throw invalid("All files must be under one root folder.");
  const [root] = [...roots];
  const holdsSkill = entries.some((entry) => {
    const segments = entry.path.split("/");
    return segments.at(-1) === "SKILL.md" && segments.length - 1 <= MAX_SKILL_ROOT_DEPTH;
  });
  if (!holdsSkill) throw invalid(`No SKILL.md in ${root} or in its sub-folders.`);
  return { entries };
}

/**
 * Turns a multipart body (`manifest` field, then the `files` parts in manifest order) into an uncompressed
 * tar stream, byte for byte as it arrives: nothing is buffered whole. A part larger or smaller than the
 * manifest says, a missing or extra part, or a busboy limit fails the returned stream with UNPROCESSABLE or
 * PAYLOAD_TOO_LARGE. `manifest` resolves as soon as the manifest field has been validated.
 */
export function multipartToTar(
  body: ReadableStream<Uint8Array>,
  contentType: string,
  limits = SKILL_UPLOAD_LIMITS,
): { manifest: Promise<SkillManifest>; tar: Readable } {
  const tar = createTarPack();
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: { "content-type": contentType },
      limits: {
        fileSize: limits.maxFileBytes,
        files: limits.maxFileCount,
        fields: 1,
        fieldSize: 1024 * 1024,
      },
    });
  } catch {
    const error = invalid("Expected a multipart/form-data body.");
    return { manifest: Promise.reject(error), tar: Readable.from([]).on("error", () => undefined) };
  }
  let manifest: SkillManifest | null = null;
  let resolveManifest!: (m: SkillManifest) => void;
  let rejectManifest!: (e: unknown) => void;
  const manifestPromise = new Promise<SkillManifest>((resolve, reject) => {
    resolveManifest = resolve;
    rejectManifest = reject;
  });
  manifestPromise.catch(() => undefined);
  let index = 0;
  let chain = Promise.resolve();
  let failed = false;
  const fail = (error: AppError) => {
    if (failed) return;
    failed = true;
    rejectManifest(error);
    tar.destroy(error);
    parser.destroy();
    // Read the rest and drop it: the refusal can only reach the client once the request body has been
    // read (a response racing unread upload bytes never arrived), and the connection stays usable.
    // Bounded: past the upload's own size limit the connection is closed instead.
    source.unpipe(parser);
    let drained = 0;
    source.on("data", (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > limits.maxTotalBytes) source.destroy();
    });
    source.resume();
  };

  parser.on("field", (name, value) => {
    if (name !== "manifest") return;
    try {
      manifest = validateManifest(JSON.parse(value));
      resolveManifest(manifest);
    } catch (error) {
      fail(isAppError(error) ? error : invalid("The manifest is not valid JSON."));
    }
  });
  parser.on("file", (_name, part) => {
    // A part cut short (the parser destroyed after a failure) errors; the failure is already reported.
    part.on("error", () => undefined);
    const entry = manifest?.entries[index++];
    if (!manifest || !entry) {
      part.resume();
      return fail(
        invalid(manifest ? "More file parts than manifest entries." : "The manifest must come first."),
      );
    }
    part.on("limit", () =>
      fail(new AppError("PAYLOAD_TOO_LARGE", `${entry.path} exceeds the per-file limit`)),
    );
    // Entries are written one after the other (tar is sequential); busboy waits for each part to drain.
    chain = chain.then(
      () =>
        new Promise<void>((resolve) => {
          let seen = 0;
          const counter = new Transform({
            transform(chunk: Buffer, _encoding, done) {
              seen += chunk.length;
              if (seen > entry.size) return done(invalid(`${entry.path} is larger than the manifest says.`));
              done(null, chunk);
            },
            flush(done) {
              done(seen === entry.size ? null : invalid(`${entry.path} is smaller than the manifest says.`));
            },
          });
          const sink = tar.entry({ name: entry.path, size: entry.size, mtime: new Date(0), mode: 0o644 });
          counter.on("error", (error) => {
            fail(error as AppError);
            resolve();
          });
          sink.on("finish", () => resolve());
          sink.on("error", () => resolve());
          part.pipe(counter).pipe(sink);
        }),
    );
  });
  parser.on("filesLimit", () => fail(invalid("Too many files.")));
  parser.on("error", () => fail(invalid("Malformed multipart body.")));
  parser.on("close", () => {
    void chain.then(() => {
      if (!manifest) return fail(invalid("The manifest field is missing."));
      if (index !== manifest.entries.length) return fail(invalid("Fewer file parts than manifest entries."));
      tar.finalize();
    });
  });
  const source = Readable.fromWeb(body as NodeWebReadableStream<Uint8Array>);
  source.on("error", () => fail(invalid("The upload was interrupted."))).pipe(parser);
  // tar-stream packs are streamx streams; the engine takes a Node Readable (errors carry over on iteration).
  const nodeTar = Readable.from(tar);
  // The consumer (the engine's install) sees errors through its own pipeline; this listener only keeps an
  // upload rejected before any install started (bad manifest) from becoming an unhandled 'error' event.
  nodeTar.on("error", () => undefined);
  return { manifest: manifestPromise, tar: nodeTar };
}

/** Archive media types the upload takes as a raw body (the reference's zip, tar and tar.gz). */
const ARCHIVE_MEDIA_TYPES: Readonly<Record<string, ArchiveFormat>> = {
  "application/zip": "zip",
  "application/x-zip-compressed": "zip",
  "application/x-tar": "tar",
  "application/gzip": "tar.gz",
  "application/x-gzip": "tar.gz",
  "application/x-compressed-tar": "tar.gz",
};
const ZArchiveFormat = z.enum(["zip", "tar", "tar.gz"]);

/** What a skill upload body is: the dashboard's folder upload, or an archive stream in one format. */
export type SkillUploadBody =
  { kind: "folder"; contentType: string } | { kind: "archive"; format: ArchiveFormat };

/**
 * Tells the two body formats apart from the request's Content-Type: `multipart/form-data` is the folder
 * upload (manifest + files); an archive is sent as the raw body, typed by its media type
 * (`application/zip`, `application/x-tar`, `application/gzip`, ...) or as `application/octet-stream`
 * with `?format=zip|tar|tar.gz`. An explicit `format` must agree with a typed body. Anything else is
 * UNPROCESSABLE before a byte of the body is read.
 */
export function skillUploadBodyOf(
  contentTypeHeader: string | null,
  formatParam: string | null,
): SkillUploadBody {
  const contentType = contentTypeHeader ?? "";
  const mediaType = contentType.split(";")[0]!.trim().toLowerCase();
  let format: ArchiveFormat | null = null;
  if (formatParam !== null) {
    const parsed = ZArchiveFormat.safeParse(formatParam);
    if (!parsed.success) throw invalid(`Unknown archive format '${formatParam}': use zip, tar or tar.gz.`);
    format = parsed.data;
  }
  if (mediaType === "multipart/form-data") {
    if (format !== null) throw invalid("A folder upload (multipart/form-data) takes no format.");
    return { kind: "folder", contentType };
  }
  const typed = ARCHIVE_MEDIA_TYPES[mediaType];
  if (typed !== undefined) {
    if (format !== null && format !== typed)
      throw invalid(`The body is ${mediaType} (${typed}) but format=${format} was given.`);
    return { kind: "archive", format: typed };
  }
  if (mediaType === "application/octet-stream" && format !== null) return { kind: "archive", format };
  throw invalid(
    "Send a skill as multipart/form-data (a folder: manifest, then files) or as an archive body: " +
      "application/zip, application/x-tar or application/gzip (tar.gz), or application/octet-stream with ?format=.",
  );
}

/** At most N skill installs at once per process (the reference's semaphore). */
export class InstallGate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      return await task();
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }
}
