import { PassThrough, type Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { DirEntry, FileStat } from "@/server/workspace/drivers/port";

/**
 * File operations of the exec-based drivers (Docker containers, Kubernetes Pods: script-files.ts; E2B
 * builds its own on the SDK's files API with these exit codes, the lock and realpath) run as small POSIX shell
 * scripts INSIDE the machine, as the workspace user: the machine's own permissions and path resolution apply (a symlink an agent planted can never make
 * Berth touch a host path), and data streams through the exec connection. Paths travel as arguments
 * (`$1`, `$2`), never spliced into the script text.
 *
 * Exit codes with a meaning: 44 not found, 45 wrong type (is / is not a directory), 47 already exists.
 */
export const SCRIPT_EXIT = { notFound: 44, wrongType: 45, exists: 47 } as const;
const EXIT = SCRIPT_EXIT;

/**
 * Shell that opens `file` (a quoted shell expression) for appending as fd 9 and takes an exclusive flock(2) on it (util-linux `flock`,
 * which the images carry with setpriv); the lock ends with the script. Waits up to 60 s for another writer.
 */
export function appendLockScript(file: string): string {
  return [
    'command -v flock >/dev/null || { echo "appending needs util-linux flock" >&2; exit 1; }',
    `exec 9>>${file} || exit 1`,
    'flock -x -w 60 9 || { echo "timed out waiting for another append" >&2; exit 1; }',
  ].join("; ");
}

export const SCRIPTS = {
  /** $1 path, $2 start (or ""), $3 byte count (or ""). */
  read: [
    'f="$1"',
    `[ -e "$f" ] || exit ${EXIT.notFound}`,
    `[ -d "$f" ] && exit ${EXIT.wrongType}`,
    'if [ -n "$2" ] && [ -n "$3" ]; then tail -c +"$(($2 + 1))" -- "$f" | head -c "$3"',
    'elif [ -n "$2" ]; then exec tail -c +"$(($2 + 1))" -- "$f"',
    'elif [ -n "$3" ]; then exec head -c "$3" -- "$f"',
    'else exec cat -- "$f"; fi',
  ].join("\n"),
  /**
   * $1 path, $2 mode ("append" | "exclusive" | "replace"), $3 octal file mode (or ""). Replace and exclusive
   * write a temp file beside the target first: readers never see half a file, and exclusive links it into
   * place, which fails atomically when the name exists.
   */
  write: [
    'f="$1"; d=$(dirname -- "$f"); b=$(basename -- "$f")',
    'mkdir -p -- "$d" || exit 1',
    // Appends hold an exclusive flock on their own `>>` descriptor (as every appender does, the gateway's
    // file endpoint included), so one call's bytes stay contiguous at any size, across processes.
    'if [ "$2" = append ]; then',
    `  ${appendLockScript('"$f"')}`,
    '  cat >&9 || exit 1; [ -z "$3" ] || chmod "$3" -- "$f"; exit 0',
    "fi",
    't="$d/.$b.tmp-$$"',
    "trap 'rm -f -- \"$t\"' EXIT",
    'cat > "$t" || exit 1',
    '[ -z "$3" ] || chmod "$3" -- "$t" || exit 1',
    'if [ "$2" = exclusive ]; then',
    `  ln -- "$t" "$f" 2>/dev/null || { { [ -e "$f" ] || [ -L "$f" ]; } && exit ${EXIT.exists}; ln -- "$t" "$f"; }`,
    "else",
    '  mv -f -- "$t" "$f"',
    "fi",
  ].join("\n"),
  /** lstat: type letter, size, mtime (seconds, fractional), octal permission bits. */
  stat: [
    `[ -e "$1" ] || [ -L "$1" ] || exit ${EXIT.notFound}`,
    "exec find \"$1\" -maxdepth 0 -printf '%y\\t%s\\t%T@\\t%m'",
  ].join("\n"),
  /** NUL-separated records "type\tsize\tmtime\tname"; -H follows a symlinked directory given as $1. */
  list: [
    `[ -d "$1" ] || { [ -e "$1" ] && exit ${EXIT.wrongType}; exit ${EXIT.notFound}; }`,
    "exec find -H \"$1\" -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%T@\\t%P\\0'",
  ].join("\n"),
  mkdir: 'exec mkdir -p -- "$1"',
  remove: 'exec rm -rf -- "$1"',
  /** $1 from, $2 to: -T treats the destination as a name, never as a directory to move into. */
  move: [
    `[ -e "$1" ] || [ -L "$1" ] || exit ${EXIT.notFound}`,
    'mkdir -p -- "$(dirname -- "$2")" || exit 1',
    'exec mv -fT -- "$1" "$2"',
  ].join("\n"),
  realpath: 'exec realpath -e -- "$1"',
  /** $1 directory to extract into (created). */
  untar: 'mkdir -p -- "$1" && exec tar -x -f - -C "$1" --no-same-owner --same-permissions',
  /** $1 path: a tar whose single top entry is its basename. */
  tar: [
    `[ -e "$1" ] || [ -L "$1" ] || exit ${EXIT.notFound}`,
    'cd -- "$(dirname -- "$1")" && exec tar -c -f - -- "$(basename -- "$1")"',
  ].join("\n"),
} as const;

/** Maps a failed script to the AppError the local backend would raise for the same errno. */
export function scriptError(exitCode: number, stderr: string, path: string, action: string): AppError {
  const details = { path, exitCode, stderr: stderr.slice(0, 500) };
  if (exitCode === EXIT.notFound || /No such file or directory/i.test(stderr)) {
    return new AppError("NOT_FOUND", `No such file or directory: ${path}`, { details });
  }
  if (exitCode === EXIT.exists) return new AppError("CONFLICT", `Already exists: ${path}`, { details });
  if (exitCode === EXIT.wrongType || /Is a directory/i.test(stderr)) {
    return new AppError("BAD_REQUEST", `Path is a directory: ${path}`, { details });
  }
  if (/Not a directory/i.test(stderr))
    return new AppError("BAD_REQUEST", `Not a directory: ${path}`, { details });
  if (/Permission denied|Operation not permitted|Read-only file system/i.test(stderr)) {
    return new AppError("FORBIDDEN", `Permission denied: ${path}`, { details });
  }
  if (/File exists/i.test(stderr)) return new AppError("CONFLICT", `Already exists: ${path}`, { details });
  return new AppError("INTERNAL", `${action} failed on ${path} (exit ${exitCode}): ${stderr.trim()}`, {
    details,
  });
}

const TYPE_LETTERS: Record<string, FileStat["type"]> = { f: "file", d: "directory", l: "symlink" };

export function parseStat(line: string): FileStat {
  const [type = "", size = "0", mtime = "0", mode = "0"] = line.trim().split("\t");
  return {
    type: TYPE_LETTERS[type] ?? "other",
    size: Number(size),
    mtimeMs: Math.round(Number(mtime) * 1000),
    mode: parseInt(mode, 8),
  };
}

export function parseList(output: string): DirEntry[] {
  return output
    .split("\0")
    .filter((record) => record.length > 0)
    .map((record) => {
      const [type = "", size = "0", mtime = "0", ...nameParts] = record.split("\t");
      const kind = TYPE_LETTERS[type] ?? "other";
      return {
        name: nameParts.join("\t"),
        type: kind,
        size: kind === "directory" ? null : Number(size),
        mtimeMs: Math.round(Number(mtime) * 1000),
      };
    });
}

/** A running script as the stream helper needs it: its output can be resumed, ended early, and awaited. */
export type ScriptRun = {
  /** Resumes the output after the sink asked for backpressure. */
  resume(): void;
  /** Ends the run early (the consumer went away): the producer must not stay blocked on a full pipe. */
  abandon(): void;
  /** The exit code; null when the connection ended without one. */
  finished: Promise<number | null>;
};

/** Where a script's output frames go; false asks for backpressure. */
export type ScriptSink = (type: "stdout" | "stderr", chunk: Buffer) => boolean;

/**
 * Streams a script's stdout with backpressure (the exec pauses while the consumer is full). Resolves once the
 * first byte arrived or the script ended cleanly with no output, so NOT_FOUND and friends reject the promise
 * instead of surfacing mid-stream; a later failure destroys the stream. `start` runs
 * `/bin/sh -c <script> <action> ...args` on the backend with the given sink.
 */
export async function streamScriptOutput(
  start: (sink: ScriptSink) => Promise<ScriptRun>,
  reportedPath: string,
  action: string,
): Promise<Readable> {
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  const stderr: Buffer[] = [];
  let started = false;
  let resolveStart: () => void = () => undefined;
  const firstByte = new Promise<void>((resolve) => (resolveStart = resolve));
  const run = await start((type, chunk) => {
    if (type === "stderr") {
      if (stderr.length < 64) stderr.push(chunk);
      return true;
    }
    started = true;
    resolveStart();
    return out.write(chunk);
  });
  out.on("drain", () => run.resume());
  out.on("close", () => {
    if (!out.writableFinished) run.abandon();
  });
  const ended = run.finished.then(
    (exitCode) => {
      const error =
        exitCode === 0
          ? null
          : exitCode === null
            ? new AppError("UNAVAILABLE", `${action} stream of ${reportedPath} was cut off`)
            : scriptError(exitCode, Buffer.concat(stderr).toString(), reportedPath, action);
      if (error && started) out.destroy(error);
      else if (!error) out.end();
      return error;
    },
    (error: unknown) => {
      const appError = new AppError("UNAVAILABLE", `${action} stream failed: ${String(error)}`, {
        cause: error,
      });
      out.destroy(appError);
      return appError;
    },
  );
  const first = await Promise.race([firstByte.then(() => null), ended]);
  if (first) throw first;
  return out;
}
