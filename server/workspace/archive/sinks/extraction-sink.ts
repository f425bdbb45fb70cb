/**
 * Where validated archive entries go. The extractor hands a sink only entries that passed EntryTree, in
 * archive order, parents first; a sink only has to write them. Two implementations: a tar re-pack streamed
 * into `WorkspaceMachine.putArchive` (works on every backend) and direct writes for a backend whose files
 * are this host's files (no tar round trip).
 */
export interface ExtractionSink {
  directory(name: string): Promise<void> | void;
  file(name: string, size: number, executable: boolean): Promise<FileSink>;
  /** `target` was checked by EntryTree (relative, inside the archive). */
  symlink(name: string, target: string): Promise<void> | void;
  /** `existing` is an earlier file entry of the same archive. */
  hardlink(name: string, existing: string): Promise<void> | void;
  /** Every entry was given: resolves once all of it is on the backend, rejects with the backend's failure. */
  finish(): Promise<void>;
  /**
   * Stops early after a validation failure. Resolves (never rejects) once the backend has stopped writing,
   * so the caller can delete the target directory knowing nothing more will land in it.
   */
  abort(): Promise<void>;
}

export interface FileSink {
  /** Undefined when more may be written at once; otherwise a promise that resolves when it may. */
  write(chunk: Buffer): Promise<void> | undefined;
  /** Every byte was written; resolves once the file is complete. */
  end(): Promise<void>;
}
