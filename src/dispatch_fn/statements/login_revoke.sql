REVOKE {role} FROM {login}
