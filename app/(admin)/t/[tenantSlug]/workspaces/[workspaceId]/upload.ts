/** A refused upload: the API's message, and its HTTP status (409: the file exists). */
export class UploadError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/**
 * A POST whose request body's progress is reported (fetch cannot report upload progress; XMLHttpRequest
 * can). Resolves with the JSON answer; rejects with an UploadError carrying the API's message
 * (`{ error: { message } }`) and the status.
 */
export function postWithProgress<T>(
  url: string,
  body: XMLHttpRequestBodyInit,
  options: { contentType?: string; onProgress?: (fraction: number) => void; signal?: AbortSignal } = {},
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", url);
    if (options.contentType) request.setRequestHeader("content-type", options.contentType);
    request.responseType = "json";
    request.upload.onprogress = (event) => {
      if (event.lengthComputable && event.total > 0) options.onProgress?.(event.loaded / event.total);
    };
    request.onload = () => {
      const answer = request.response as (T & { error?: { message?: string } }) | null;
      if (request.status >= 200 && request.status < 300) {
        options.onProgress?.(1);
        resolve(answer as T);
      } else {
        const message = answer?.error?.message ?? `Upload failed (HTTP ${request.status})`;
        reject(new UploadError(message, request.status));
      }
    };
    request.onerror = () => reject(new Error("The upload was interrupted."));
    request.onabort = () => reject(new Error("Upload cancelled."));
    options.signal?.addEventListener("abort", () => request.abort(), { once: true });
    request.send(body);
  });
}

/** `/api/workspaces/:id/<route>?tenantSlug=&…`, the URL of a workspace route handler. */
export function workspaceRoute(
  workspaceId: string,
  route: "files" | "skills",
  query: Record<string, string | null | undefined>,
): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value) params.set(name, value);
  return `/api/workspaces/${encodeURIComponent(workspaceId)}/${route}?${params.toString()}`;
}

export function formatBytes(bytes: number | null): string {
  if (bytes === null) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
