/** An honest placeholder for dashboard sections whose feature has not been built yet. */
export function NotBuiltYet({ title, description }: { title: string; description: string }) {
  return (
    <>
      <h1>{title}</h1>
      <p className="lead">{description}</p>
      <div className="placeholder" role="status">
        This page is not built yet. The API and the dashboard view for it arrive with a later milestone;
        nothing here is hidden or simulated.
      </div>
    </>
  );
}
