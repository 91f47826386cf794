"""The admin's "Entries" console: every entry of the deployment, whatever its source, read
from Redis (:mod:`.listing`), an entry's page (:mod:`.page`), its runtime controls
(:mod:`.controls`) and the admin views that serve them (:mod:`.views`)."""
