"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import { formatDate } from "../workspace-format";

/** What the preview shows of a file; the download link gives the whole of it. */
const PREVIEW_BYTES = 64 * 1024;

function childPath(dir: string, name: string): string {
  return dir === "." || dir === "" ? name : `${dir}/${name}`;
}

function parentPath(dir: string): string {
  const cut = dir.lastIndexOf("/");
  return cut === -1 ? "." : dir.slice(0, cut);
}

function formatBytes(bytes: number | null): string {
  if (bytes === null) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** Text that is mostly printable; anything else is shown as "binary" rather than as garbage. */
function looksBinary(text: string): boolean {
  return text.includes("\u0000") || (text.match(/\uFFFD/g)?.length ?? 0) > text.length / 50;
}

/**
 * The workdir as the agent sees it: folders to walk, a preview of the first 64 KiB of a file, and a
 * download through a link signed for that one file for a minute (asked for when clicked, so it is
 * never stale).
 */
export function WorkspaceFiles({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [dir, setDir] = useState(".");
  const [openFile, setOpenFile] = useState<string | null>(null);
  const [downloadError, setDownloadError] = useState<string | null>(null);

  const listing = useQuery(trpc.workspace.files.list.queryOptions({ tenantSlug, workspaceId, path: dir }));
  const preview = useQuery(
    trpc.workspace.files.read.queryOptions(
      { tenantSlug, workspaceId, path: openFile ?? ".", maxBytes: PREVIEW_BYTES },
      { enabled: openFile !== null },
    ),
  );

  const download = async (file: string) => {
    setDownloadError(null);
    try {
      const link = await queryClient.fetchQuery(
        trpc.workspace.files.downloadToken.queryOptions(
          { tenantSlug, workspaceId, path: file },
          { staleTime: 0 },
        ),
      );
      // `download=true`: served as an attachment under the file's own name, not shown in the tab.
      window.location.assign(`${link.url}&download=true`);
    } catch (error) {
      setDownloadError(error instanceof Error ? error.message : String(error));
    }
  };

  const enter = (path: string) => {
    setDir(path);
    setOpenFile(null);
  };

  return (
    <section className="panel" aria-labelledby="files-heading">
      <h2 id="files-heading">Files</h2>
      <p className="muted" data-testid="files-path">
        <span className="mono">/{listing.data?.path === "." ? "" : (listing.data?.path ?? "")}</span>
        {dir !== "." && (
          <>
            {" "}
            <button type="button" className="secondary" onClick={() => enter(parentPath(dir))}>
              Up
            </button>
          </>
        )}
      </p>
      {listing.error && (
        <div className="alert error" role="alert">
          {listing.error.message}
        </div>
      )}
      {listing.data &&
        (listing.data.entries.length === 0 ? (
          <p className="muted">This folder is empty.</p>
        ) : (
          <table className="data">
            <thead>
              <tr>
                <th>Name</th>
                <th>Size</th>
                <th>Modified</th>
              </tr>
            </thead>
            <tbody>
              {listing.data.entries.map((entry) => {
                const path = childPath(listing.data.path, entry.name);
                return (
                  <tr key={entry.name} data-testid="file-row">
                    <td className="mono">
                      <button
                        type="button"
                        className="link"
                        onClick={() => (entry.isDir ? enter(path) : setOpenFile(path))}
                      >
                        {entry.isDir ? `${entry.name}/` : entry.name}
                      </button>
                    </td>
                    <td>{entry.isDir ? "" : formatBytes(entry.sizeBytes)}</td>
                    <td>{entry.updatedAt ? formatDate(entry.updatedAt) : ""}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        ))}

      {openFile !== null && (
        <div style={{ marginTop: 16 }} data-testid="file-preview">
          <div className="form-row" style={{ alignItems: "center" }}>
            <strong className="mono">{openFile}</strong>
            <button type="button" className="secondary" onClick={() => void download(openFile)}>
              Download
            </button>
            <button type="button" className="secondary" onClick={() => setOpenFile(null)}>
              Close
            </button>
          </div>
          {downloadError && (
            <div className="alert error" role="alert">
              {downloadError}
            </div>
          )}
          {preview.error && (
            <div className="alert error" role="alert">
              {preview.error.message}
            </div>
          )}
          {preview.data &&
            (looksBinary(preview.data.content) ? (
              <p className="muted">
                Binary file, {formatBytes(preview.data.sizeBytes)}: download it to open it.
              </p>
            ) : (
              <>
                <pre className="mono" data-testid="file-content" style={{ whiteSpace: "pre-wrap" }}>
                  {preview.data.content}
                </pre>
                {preview.data.truncated && (
                  <p className="muted">
                    The first {formatBytes(PREVIEW_BYTES)} of {formatBytes(preview.data.sizeBytes)}: download
                    it for the rest.
                  </p>
                )}
              </>
            ))}
        </div>
      )}
    </section>
  );
}
