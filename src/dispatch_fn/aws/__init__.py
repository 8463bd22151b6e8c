"""What AWS calls: the Lambda handler, its events and queries, the migration custom resource."""
