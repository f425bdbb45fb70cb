import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";

export type Child = {
  process: ChildProcessWithoutNullStreams;
  /** Resolves with the next stdout line matching `predicate`. */
  nextLine(predicate?: (line: string) => boolean): Promise<string>;
  exited: Promise<number | null>;
  stderr: () => string;
};

/** Starts `script` (a .ts entry in this folder) under tsx with `env` added to the test's environment. */
export function startChild(script: string, env: Record<string, string>): Child {
  // `--import tsx` (not the tsx CLI, which forks a second process): the child's pid is the worker's pid.
  const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, script)], {
    env: { ...process.env, ...env },
    cwd: path.resolve(import.meta.dirname, "../../.."),
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const waiters: { predicate: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  const seen: string[] = [];
  createInterface({ input: child.stdout }).on("line", (line) => {
    const index = waiters.findIndex((w) => w.predicate(line));
    if (index >= 0) waiters.splice(index, 1)[0]!.resolve(line);
    else seen.push(line);
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    process: child,
    stderr: () => stderr,
    exited,
    nextLine(predicate = () => true) {
      const index = seen.findIndex(predicate);
      if (index >= 0) return Promise.resolve(seen.splice(index, 1)[0]!);
      return new Promise<string>((resolve, reject) => {
        waiters.push({ predicate, resolve });
        void exited.then((code) =>
          reject(new Error(`${script} exited (${code}) first:\n${stderr.slice(-2000)}`)),
        );
      });
    },
  };
}
