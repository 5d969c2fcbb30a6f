PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/t/.whl make setup
