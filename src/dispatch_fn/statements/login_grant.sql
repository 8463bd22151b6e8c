GRANT {role} TO {login}
