/** The outcome of the last change made in a panel: an error (announced as an alert) or a success. */
export type NoticeMessage = { kind: "error" | "success"; text: string };

export function Notice({ message, testId }: { message: NoticeMessage | null; testId: string }) {
  if (!message) return null;
  return (
    <div
      className={`alert ${message.kind}`}
      role={message.kind === "error" ? "alert" : "status"}
      style={{ marginTop: 12 }}
      data-testid={testId}
    >
      {message.text}
    </div>
  );
}
