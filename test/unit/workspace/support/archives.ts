import { Readable } from "node:stream";
import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import yazl from "yazl";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";

export type TarFixtureEntry = {
  name: string;
  type?: "file" | "directory" | "symlink" | "link" | "character-device" | "fifo";
  content?: string | Buffer;
  linkname?: string;
  mode?: number;
};

/** A tar (optionally gzipped) built with tar-stream, which writes whatever names it is given. */
export async function tarOf(entries: TarFixtureEntry[], gzip = false): Promise<Buffer> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const chunk of pack as AsyncIterable<Buffer>) chunks.push(chunk);
  })();
  for (const entry of entries) {
    const type = entry.type ?? "file";
    if (type === "file") {
      pack.entry({ name: entry.name, mode: entry.mode ?? 0o644 }, Buffer.from(entry.content ?? ""));
    } else {
      pack.entry({
        name: entry.name,
        type,
        mode: entry.mode ?? 0o755,
        ...(entry.linkname === undefined ? {} : { linkname: entry.linkname }),
      });
    }
  }
  pack.finalize();
  await collected;
  const tar = Buffer.concat(chunks);
  return gzip ? gzipSync(tar) : tar;
}

export type ZipFixtureEntry = { name: string; content?: string | Buffer; mode?: number; directory?: boolean };

/** A zip built with yazl (deflated). yazl refuses hostile names, so see `renameZipEntry` for those. */
export async function zipOf(entries: ZipFixtureEntry[]): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const entry of entries) {
    if (entry.directory) zip.addEmptyDirectory(entry.name);
    else zip.addBuffer(Buffer.from(entry.content ?? ""), entry.name, { mode: entry.mode ?? 0o100644 });
  }
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * Rewrites an entry name in place (local header and central directory) to one of the same byte length:
 * how the tests get `../x` or `/x` into a zip that yazl would refuse to write.
 */
export function renameZipEntry(zip: Buffer, from: string, to: string): Buffer {
  const source = Buffer.from(from);
  const target = Buffer.from(to);
  if (source.length !== target.length) throw new Error("renameZipEntry needs names of equal length");
  const out = Buffer.from(zip);
  let replaced = 0;
  for (let index = out.indexOf(source); index !== -1; index = out.indexOf(source, index + 1)) {
    target.copy(out, index);
    replaced += 1;
  }
  if (replaced < 2) throw new Error(`expected the name in both headers, found it ${replaced} times`);
  return out;
}

/** A zip whose one file is `size` zero bytes: deflate shrinks it about 1000:1 (a zip bomb). */
export async function zipBomb(size: number): Promise<Buffer> {
  return zipOf([
    { name: "bomb/SKILL.md", content: "---\nname: bomb\ndescription: boom\n---\n" },
    { name: "bomb/zeros.bin", content: Buffer.alloc(size) },
  ]);
}

/**
 * A lazily generated tar of `count` empty files under `skill/`: produced only as fast as it is read, so a
 * consumer that stops early (entry cap) never makes the test build the whole archive.
 */
export function tinyEntriesTar(count: number): Readable & { produced: () => number } {
  let index = 0;
  const stream = new Readable({
    read() {
      if (index === count) {
        this.push(Buffer.alloc(1024));
        this.push(null);
        return;
      }
      const batch: Buffer[] = [];
      for (let i = 0; i < 64 && index < count; i += 1, index += 1)
        batch.push(ustarHeader(`skill/f${index}`, 0));
      this.push(Buffer.concat(batch));
    },
  });
  return Object.assign(stream, { produced: () => index });
}

function ustarHeader(name: string, size: number): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 100, "utf8");
  header.write("0000644\0", 100);
  header.write("0000000\0", 108);
  header.write("0000000\0", 116);
  header.write(`${size.toString(8).padStart(11, "0")}\0`, 124);
  header.write("00000000000\0", 136);
  header.write("        ", 148);
  header.write("0", 156);
  header.write("ustar\0", 257);
  header.write("00", 263);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return header;
}

export const VALID_SKILL_MD = (name: string, description = "Does things") =>
  `---\nname: ${name}\ndescription: ${description}\n---\n# ${name}\n\nUse it well.\n`;

/**
 * A zip of `count` empty stored files written by hand (yazl is quadratic in the entry count), with the
 * zip64 end records that more than 65,535 entries need.
 */
export function manyEntriesZip(count: number): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (let i = 0; i < count; i += 1) {
    const name = Buffer.from(`s/f${i}`);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x21, 12);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(0x031e, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x21, 14);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE((0o100644 << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name);
    centrals.push(central, name);
    offset += local.length + name.length;
  }
  const directory = Buffer.concat(centrals);
  const zip64End = Buffer.alloc(56);
  zip64End.writeUInt32LE(0x06064b50, 0);
  zip64End.writeBigUInt64LE(44n, 4);
  zip64End.writeUInt16LE(45, 12);
  zip64End.writeUInt16LE(45, 14);
  zip64End.writeBigUInt64LE(BigInt(count), 24);
  zip64End.writeBigUInt64LE(BigInt(count), 32);
  zip64End.writeBigUInt64LE(BigInt(directory.length), 40);
  zip64End.writeBigUInt64LE(BigInt(offset), 48);
  const locator = Buffer.alloc(20);
  locator.writeUInt32LE(0x07064b50, 0);
  locator.writeBigUInt64LE(BigInt(offset + directory.length), 8);
  locator.writeUInt32LE(1, 16);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(0xffff, 8);
  end.writeUInt16LE(0xffff, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, zip64End, locator, end]);
}

/**
 * A HostFolderMachine that writes archives directly on the host ("direct host writes", its fast path) or, with
 * its `hostPath` hidden, through the tar re-pack every sandboxed backend uses.
 */
export function backendFor(sink: "direct host writes" | "tar re-pack", workdir: string): HostFolderMachine {
  const backend = new HostFolderMachine({ workdir });
  if (sink === "tar re-pack") Object.defineProperty(backend, "hostPath", { value: undefined });
  return backend;
}
