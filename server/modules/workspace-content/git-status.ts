import type { WorkspaceMachine } from "@/server/workspace/drivers/port";

/** The reference's GitStatus (agentscope-spec.md §9.4): branch, head, ahead/behind, diff size, file counts. */
export type GitStatus = {
  branch: string | null;
  head: string | null;
  ahead: number;
  behind: number;
  insertions: number;
  deletions: number;
  staged: number;
  unstaged: number;
  untracked: number;
  conflicted: number;
};

const GIT_TIMEOUT_MS = 5_000;

/** Best effort, like the reference: null when the directory is no git work tree or git is missing. */
export async function readGitStatus(backend: WorkspaceMachine, cwd: string): Promise<GitStatus | null> {
  const status = await backend
    .exec(
      [
        "git",
        "--no-optional-locks",
        "status",
        "--porcelain=v2",
        "--branch",
        "-z",
        "--untracked-files=normal",
        "--ignore-submodules=all",
      ],
      { cwd, timeoutMs: GIT_TIMEOUT_MS, maxBufferBytes: 4 * 1024 * 1024 },
    )
    .catch(() => null);
  if (!status || status.exitCode !== 0) return null;
  const result = parsePorcelainV2(status.stdout.toString("utf8"));
  const diff = await backend
    .exec(["git", "--no-optional-locks", "diff", "--shortstat", "HEAD"], { cwd, timeoutMs: GIT_TIMEOUT_MS })
    .catch(() => null);
  if (diff && diff.exitCode === 0) {
    const text = diff.stdout.toString("utf8");
    result.insertions = Number(/(\d+) insertion/.exec(text)?.[1] ?? 0);
    result.deletions = Number(/(\d+) deletion/.exec(text)?.[1] ?? 0);
  }
  return result;
}

function parsePorcelainV2(output: string): GitStatus {
  const status: GitStatus = {
    branch: null,
    head: null,
    ahead: 0,
    behind: 0,
    insertions: 0,
    deletions: 0,
    staged: 0,
    unstaged: 0,
    untracked: 0,
    conflicted: 0,
  };
  const records = output.split("\0");
  for (let i = 0; i < records.length; i++) {
    const record = records[i]!;
    if (record.startsWith("# branch.oid ")) {
      const oid = record.slice("# branch.oid ".length);
      status.head = oid === "(initial)" ? null : oid;
    } else if (record.startsWith("# branch.head ")) {
      const head = record.slice("# branch.head ".length);
      status.branch = head === "(detached)" ? null : head;
    } else if (record.startsWith("# branch.ab ")) {
      const match = /\+(\d+) -(\d+)/.exec(record);
      status.ahead = Number(match?.[1] ?? 0);
      status.behind = Number(match?.[2] ?? 0);
    } else if (record.startsWith("1 ") || record.startsWith("2 ")) {
      const xy = record.slice(2, 4);
      if (xy[0] !== ".") status.staged++;
      if (xy[1] !== ".") status.unstaged++;
      // A rename/copy record is followed by its original path as a separate NUL-terminated field.
      if (record.startsWith("2 ")) i++;
    } else if (record.startsWith("u ")) {
      status.conflicted++;
    } else if (record.startsWith("? ")) {
      status.untracked++;
    }
  }
  return status;
}
